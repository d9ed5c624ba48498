"""What a sweep writes and reads back: rows (rows), the writer and the generation log,
the sweep folder's record (sweep_folder, provenance), and the metrics read from rows.
"""
