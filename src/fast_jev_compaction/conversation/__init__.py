"""Step 1, the conversation: messages, transcripts read and written, calls paired and named, sizes."""
