function [payload, elementType, bytes] = sonopipe_payload(data)
%SONOPIPE_PAYLOAD The bytes sp_send takes for a MATLAB array, and their element type name.
%   MATLAB stores arrays column-major: an array of size [n1 n2 n3] is, in the C order of the wire
%   format, an array of shape [n3 n2 n1]. The payload is the array's memory as it is; a complex
%   array becomes interleaved single (I, Q) = 'complex64'.
if ~isreal(data)
    data = single(data);
    payload = zeros(2 * numel(data), 1, 'single');
    payload(1:2:end) = real(data(:));
    payload(2:2:end) = imag(data(:));
    elementType = 'complex64';
else
    switch class(data)
        case 'int16'
            elementType = 'int16';
        case 'single'
            elementType = 'float32';
        case 'double'
            elementType = 'float64';
        case 'uint8'
            elementType = 'uint8';
        otherwise
            error('sonopipe:payload', 'class %s has no sonopipe element type (int16, single, double, uint8, complex)', class(data));
    end
    payload = data(:);
end
bytesPerValue = struct('int16', 2, 'single', 4, 'double', 8, 'uint8', 1);
bytes = uint64(numel(payload) * bytesPerValue.(class(payload)));
end
