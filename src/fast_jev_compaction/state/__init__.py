"""Step 2, the Jev state: the goal, the history fitted to its stages and windows, questions and answers."""
