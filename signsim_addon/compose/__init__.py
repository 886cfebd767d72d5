"""Composing: splice library clips into one action with blended seams."""
