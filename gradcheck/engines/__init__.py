"""The built-in backends, one module or folder per engine, each independent of the others."""
