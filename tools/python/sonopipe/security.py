"""CURVE keys for a client of a daemon with ``security.curve`` (docs/operations.md, "Security").

Every client takes the same two options, as the C++ tools' flags do:
  curve_server_key       the daemon's public key: 40 characters of Z85, or the path of its .key file
  curve_client_key_file  this client's .key_secret (sonopipe-keygen, or pyzmq's zmq.auth)
Key files are ZeroMQ certificates, read with pyzmq's own ``zmq.auth.load_certificate``.
"""
import os

import zmq
import zmq.auth

KEY_TEXT_LENGTH = 40  # Z85 text of a 32-byte key


def _server_public_key(key_or_path):
    if len(key_or_path) == KEY_TEXT_LENGTH and not os.path.exists(key_or_path):
        return key_or_path.encode()
    public, _ = zmq.auth.load_certificate(key_or_path)
    return public


def apply_curve_client(socket, curve_server_key=None, curve_client_key_file=None):
    """Makes `socket` a CURVE client (before its connect); nothing when neither option is given."""
    if not curve_server_key and not curve_client_key_file:
        return
    if not (curve_server_key and curve_client_key_file):
        raise ValueError("CURVE needs both curve_server_key and curve_client_key_file")
    public, secret = zmq.auth.load_certificate(curve_client_key_file)
    if not secret:
        raise ValueError(f"{curve_client_key_file}: no secret-key (pass the .key_secret file, not the .key)")
    socket.curve_serverkey = _server_public_key(curve_server_key)
    socket.curve_publickey = public
    socket.curve_secretkey = secret
