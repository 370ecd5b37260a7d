"""The tick path: fire -> admit -> acquire -> run -> record -> release."""
