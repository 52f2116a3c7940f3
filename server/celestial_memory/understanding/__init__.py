"""What a memory is and what is understood of it: its type (fact, preference, triple, insight or
episode), its protection (immutable memories), the feedback that tells it whether it helped
(docs/understanding.md; docs/design.md, "Types, protection and feedback"), and what a model
adds after the Store has answered (docs/design.md, "Understanding with a model")."""
