"""The pooled models' log densities in C, for nutpie: each graph written as one C function
(``writer``, each operation in ``operations``, their C text in ``c_code``), compiled by the
system's C compiler and kept in the cache folder (``library``).

Layers, top to bottom: ``writer``; ``operations``; ``c_code`` | ``library``.
"""
