"""``--archive``: accepted messages handed to a writer process that appends Parquet segments
(the format is the library's, ``filtex_proton.archive``).
"""
