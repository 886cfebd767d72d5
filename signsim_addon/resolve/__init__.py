"""Pose-space self-collision resolution: api (use cases), skin (penetration on the evaluated skin), cli."""
