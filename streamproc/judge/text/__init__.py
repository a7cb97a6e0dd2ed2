"""Reading text: sentences, claims, evidence units, and the word features the checks compare."""
