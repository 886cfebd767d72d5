"""The bundled sample signer and the end-to-end demo."""
