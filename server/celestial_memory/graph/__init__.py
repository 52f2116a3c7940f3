"""Connected memory: entities a memory mentions and the relations between memories. ``entities``
finds the names, places, dates, amounts and quoted titles in a memory's text with English and
Korean rules (no model), each with a normalised key that memories sharing an entity have in
common."""
