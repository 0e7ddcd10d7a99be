classdef SonopipeSender < handle
%SONOPIPESENDER Sends MATLAB arrays to sonopiped through libsonopipe-client (sp_sender, sp_send).
%   sender = SonopipeSender(endpoint)               lossless (PUSH) to `ingest: {pattern: pull}`
%   sender = SonopipeSender(endpoint, false)        live (PUB) to `ingest: {pattern: sub}`
%   sender = SonopipeSender(endpoint, true, keys)   with CURVE: keys.serverPublic, keys.clientPublic,
%                                                   keys.clientSecret (40-character Z85 text each)
%   sender.setSendTimeout(ms)                       how long a lossless send waits for the daemon
%   sender.send(data, description)                  one frame; errors carry sp_last_error()
%   delete(sender)                                  delivers queued frames (up to 10 s) and closes
%
%   description (struct), C order = MATLAB's dimensions reversed:
%     kind                     'iq' | 'rf' | 'dce' | 'channel_rf' | 'channel_iq'
%     axes                     struct array, outermost first, fields name, spacing, unit, origin;
%                              axis i has size size(data, numel(axes) - i + 1)
%     streamId                 (0)      sequence (automatic 0, 1, 2, ... per stream if absent)
%     acquisitionTimeNs        (stamped at send if absent), an int64
%     samplingFrequencyHz (0), centerFrequencyHz (0), demodulationFrequencyHz (0), speedOfSoundMPerS (1540)
%     vectors                  struct array: name, values, unit      (optional)
%     attributes               struct array: key, value (char)        (optional)
    properties (SetAccess = private)
        Handle   % lib.pointer to the library's sp_sender
    end

    methods
        function obj = SonopipeSender(endpoint, lossless, curveKeys)
            if nargin < 2
                lossless = true;
            end
            sonopipe_load();
            obj.Handle = libpointer('voidPtr');
            sonopipe_check(calllib('sonopipe_client', 'sp_sender_create', int32(lossless), obj.Handle), 'sp_sender_create');
            if nargin >= 3 && ~isempty(curveKeys)
                sonopipe_check(calllib('sonopipe_client', 'sp_sender_set_curve', obj.Handle, curveKeys.serverPublic, ...
                                       curveKeys.clientPublic, curveKeys.clientSecret), 'sp_sender_set_curve');
            end
            sonopipe_check(calllib('sonopipe_client', 'sp_sender_connect', obj.Handle, endpoint), 'sp_sender_connect');
        end

        function setSendTimeout(obj, timeoutMs)
            sonopipe_check(calllib('sonopipe_client', 'sp_sender_set_send_timeout', obj.Handle, int32(timeoutMs)), ...
                           'sp_sender_set_send_timeout');
        end

        function send(obj, data, description)
            [payload, elementType, bytes] = sonopipe_payload(data);
            frame = libpointer('voidPtr');
            sonopipe_check(calllib('sonopipe_client', 'sp_frame_create', frame), 'sp_frame_create');
            try
                describe(frame, data, elementType, description);
                status = calllib('sonopipe_client', 'sp_send', obj.Handle, frame, payload, bytes);
            catch failure
                calllib('sonopipe_client', 'sp_frame_destroy', frame);
                rethrow(failure);
            end
            calllib('sonopipe_client', 'sp_frame_destroy', frame);
            sonopipe_check(status, 'sp_send');
        end

        function delete(obj)
            if ~isempty(obj.Handle)
                calllib('sonopipe_client', 'sp_sender_close', obj.Handle);
                obj.Handle = [];
            end
        end
    end
end

function describe(frame, data, elementType, description)
% The sp_frame_* calls for one frame description (see the class help).
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_kind', frame, description.kind), 'sp_frame_set_kind');
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_element_type', frame, elementType), 'sp_frame_set_element_type');
count = numel(description.axes);
for i = 1:count
    entry = description.axes(i);
    sonopipe_check(calllib('sonopipe_client', 'sp_frame_add_axis', frame, entry.name, uint64(size(data, count - i + 1)), ...
                           double(entry.spacing), entry.unit, double(entry.origin)), 'sp_frame_add_axis');
end
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_stream_id', frame, uint32(field_or(description, 'streamId', 0))), ...
               'sp_frame_set_stream_id');
if isfield(description, 'sequence')
    sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_sequence', frame, uint64(description.sequence)), 'sp_frame_set_sequence');
end
if isfield(description, 'acquisitionTimeNs')
    sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_acquisition_time_ns', frame, int64(description.acquisitionTimeNs)), ...
                   'sp_frame_set_acquisition_time_ns');
end
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_sampling_frequency', frame, double(field_or(description, 'samplingFrequencyHz', 0))), ...
               'sp_frame_set_sampling_frequency');
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_center_frequency', frame, double(field_or(description, 'centerFrequencyHz', 0))), ...
               'sp_frame_set_center_frequency');
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_demodulation_frequency', frame, ...
                       double(field_or(description, 'demodulationFrequencyHz', 0))), 'sp_frame_set_demodulation_frequency');
sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_speed_of_sound', frame, double(field_or(description, 'speedOfSoundMPerS', 1540))), ...
               'sp_frame_set_speed_of_sound');
vectors = field_or(description, 'vectors', struct('name', {}, 'values', {}, 'unit', {}));
for i = 1:numel(vectors)
    values = double(vectors(i).values(:));
    sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_vector', frame, vectors(i).name, values, uint64(numel(values)), ...
                           vectors(i).unit), 'sp_frame_set_vector');
end
attributes = field_or(description, 'attributes', struct('key', {}, 'value', {}));
for i = 1:numel(attributes)
    sonopipe_check(calllib('sonopipe_client', 'sp_frame_set_attribute', frame, attributes(i).key, attributes(i).value), ...
                   'sp_frame_set_attribute');
end
end

function value = field_or(description, name, default)
if isfield(description, name)
    value = description.(name);
else
    value = default;
end
end
