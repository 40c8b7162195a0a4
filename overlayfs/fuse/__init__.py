"""FUSE backend: a pyfuse3 server (on trio, in its own process) serving the merged view of the layer format.

Run as ``python -m overlayfs.fuse <lower> <upper> <metadir> <mountpoint>``; :mod:`overlayfs.mount` starts,
watches and unmounts it. Owns the inode table and copy-up (:mod:`.tree`) and the request handlers
(:mod:`.ops`, on inodes and names; :mod:`.handles`, the open handles). Writes go to the same upper layer the
pure-Python view uses; reads of lower files and the bases of copied-up paths are recorded in the overlay's
meta dir.
"""
