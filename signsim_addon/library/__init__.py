"""The motion library: import mocap (BVH, FBX, glTF) into a .blend of tagged clips, search it."""
