"""jax.scipy.special.gammainc (lax.igamma): gammainc(1e17, 1e17) does not return (the run time
grows with a where a and x are close: ~0.3 s at 1e12, 8-15 s at 1e15, and gammainc(1e16, 1e16)
was still running after 14 minutes when it was killed). Run in a child process with a 60 s
limit so this script ends."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import subprocess  # noqa: E402

CHILD = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.scipy.special as jss
print(float(jss.gammainc(1e17, 1e17)))
"""
try:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60)
    print("gammainc(1e17, 1e17) returned:", done.stdout.strip(), "(exact: 0.5000000000013)")
    print("FIXED" if done.returncode == 0 else "REPRODUCES")
except subprocess.TimeoutExpired:
    print("gammainc(1e17, 1e17) did not return within 60 s (exact: 0.5000000000013)")
    print("REPRODUCES")
