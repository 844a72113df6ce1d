"""The whole DuoPD PNM (issue 16): controller, buffer, compute array, vector unit and MMU joined into one block."""
