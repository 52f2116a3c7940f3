"""The memory services: what each RPC asks of the memory, orchestrated over recall, the zones,
the graph, understanding and the store (service.py is the entry; storing, editing, listing,
archive, transfer, repeats and the Context block are its parts)."""
