"""The three commands (agefast, agefast-keygen, agefast-inspect) and what they share.
"""
