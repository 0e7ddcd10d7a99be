function sonopipe_check(status, what)
%SONOPIPE_CHECK Raises a MATLAB error with the library's message when a call did not return SP_OK (0).
%   The message is sp_last_error(), e.g. 'sp_send: payload has 2044 bytes, shape float32[...] needs 2048'.
if status ~= 0
    error('sonopipe:client', '%s returned %d: %s', what, status, calllib('sonopipe_client', 'sp_last_error'));
end
end
