"""Step 3, the decisions: rules, budget, digests, markers, the rebuild, the archive, old turns moved out."""
