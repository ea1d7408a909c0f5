"""File plumbing under the payload: sources, result buffers, whole-or-nothing
output files, reserved blocks, direct I/O, pipes, memory and CPUs.
"""
