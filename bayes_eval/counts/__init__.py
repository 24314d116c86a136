"""The counts the pooled and crossed models read.

``layout`` lays a table's rows out as the flat arrays the models index (``Layout``), with
the counts an audited grader scored (``layout_of``) and what a compiled model depends on
(``model_structure``); ``grading`` holds the terms of a graded count's sum over its true
count; ``clusters`` marginalises runs that come in clusters; ``data`` gives counts to a
PyMC model as its data. Nothing here imports ``pooled`` or ``crossed``, which both read it.
"""
