import os
import tempfile

# ArviZ and PyTensor need writable cache folders.
os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="mpl-"))
