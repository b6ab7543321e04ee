"""Checks: numeric (VJP/JVP/cross-mode/order 2); semantic probes and audits live beside it."""
