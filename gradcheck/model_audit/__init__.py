"""audit(): a model's gradient-flow map and its training step, parameter by parameter."""
