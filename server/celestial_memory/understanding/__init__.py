"""What a memory is and how it is held: its type (fact, preference, triple, insight or
episode), its protection (immutable memories) and the feedback that tells it whether it helped
(docs/understanding.md; docs/design.md, "Types, protection and feedback")."""
