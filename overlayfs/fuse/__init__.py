"""FUSE backend: our own FUSE server (in its own process) serving the merged view of the layer format.

Run as ``python -m overlayfs.fuse <lower> <upper> <metadir> <mountpoint>``; :mod:`overlayfs.mount` starts,
watches and unmounts it. Two transports serve the same operations: its own, which speaks the kernel's
protocol on ``/dev/fuse`` itself (:mod:`.wire` the layouts, :mod:`.server` the request loop and INIT,
:mod:`.requests` each opcode's arguments, :mod:`.device` mounting), and pyfuse3 on
libfuse (:mod:`.pyfuse3_transport`), where the kernel lacks what the own one needs or where it is named
(:class:`overlayfs.backends.FuseBackend` chooses; :mod:`.trace` records the requests either received).
Owns the inode table and copy-up (:mod:`.tree`), the request handlers (:mod:`.ops` on inodes and names,
:mod:`.handles` on contents and listings), the per-node descriptors reads and writes go through
(:mod:`.files`) and the changes the pure view made behind its back (:mod:`.external`). Writes go to the
same upper layer the pure-Python view uses; reads of lower files and the bases of copied-up paths are
recorded in the overlay's meta dir, each byte counted against the upper layer's bound (:mod:`.records`).
"""
