"""A task's cases beyond its file: one unseen case drawn from its family (unseen_draw;
the family is kbx_ray/unseen.py's) and each case's memory footprint (footprint).
"""
