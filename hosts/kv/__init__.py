"""The key-value cache's host side: the storage server and its clients (``store``)."""
