"""The compression methods: what each trains and how the successor comes out of it."""
