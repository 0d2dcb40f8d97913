"""successors"""
