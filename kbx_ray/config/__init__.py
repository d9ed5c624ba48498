"""The settings: the typed schema (structured, schema), conf/ and overrides composed into a
Config (compose), GPU pools (hardware), the config resolved once into a Sweep (plan).
"""
