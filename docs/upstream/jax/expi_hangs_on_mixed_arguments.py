"""jax.scipy.special.expi: the forward does not return on an array mixing a tiny and an O(1)
argument (expi([-1e-10, 1.0])), though each element alone evaluates at once. Run in a child
process with a 60 s limit so this script ends."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import subprocess  # noqa: E402

CHILD = """
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import jax.scipy.special as jss
print(np.asarray(jss.expi(np.array([-1e-10, 1.0]))))
"""
try:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60)
    print("expi([-1e-10, 1.0]) returned:", done.stdout.strip(), "(exact: -22.4486, 1.8951)")
    print("FIXED" if done.returncode == 0 else "REPRODUCES")
except subprocess.TimeoutExpired:
    print("expi([-1e-10, 1.0]) did not return within 60 s (exact: -22.4486, 1.8951)")
    print("REPRODUCES")
