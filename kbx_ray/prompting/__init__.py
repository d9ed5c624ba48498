"""The text around a model call: a task -> its prompt (prompts), a completion or a file
-> a candidate's code (extract, candidate_file).
"""
