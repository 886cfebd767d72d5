"""Soft face: force-dual modes of the head's skin, written as shape keys keyed per frame."""
