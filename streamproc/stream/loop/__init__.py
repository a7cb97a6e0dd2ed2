"""The consumer-loop discipline every loop shares: fair reads, progress, transactions."""
