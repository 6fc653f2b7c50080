def clip(text, n=200):
    """The first n characters of text."""
    return text if len(text) <= n else text[:n] + "..."
