classdef SonopipeSubscriber < handle
%SONOPIPESUBSCRIBER Reads sonopiped's results into MATLAB through libsonopipe-client (sp_subscriber).
%   subscriber = SonopipeSubscriber(endpoint)                  every result ('result/')
%   subscriber = SonopipeSubscriber(endpoint, 'result/bmode/') one pipeline's results
%   subscriber = SonopipeSubscriber(endpoint, prefix, keys)    with CURVE keys (see SonopipeSender)
%   result = subscriber.next(timeoutMs)                        [] when none came in time
%   result = subscriber.next(timeoutMs, {'probe'})             also these attributes of the frame
%
%   result: topic, pipeline, output, streamId, inputSequence, acquisitionTimeNs, inputKind,
%   elementType, unit, backend, axes (struct array: name, size, spacing, unit, origin; outermost
%   first), attributes (struct: key -> value, '' when absent) and data, an array of size
%   [fliplr(axis sizes) 1] (C order reversed), complex single for complex64, uint16 bits for float16.
%   Results published before the subscription reached the daemon are not received (ZeroMQ).
    properties (SetAccess = private)
        Handle   % lib.pointer to the library's sp_subscriber
    end

    methods
        function obj = SonopipeSubscriber(endpoint, topicPrefix, curveKeys)
            if nargin < 2
                topicPrefix = 'result/';
            end
            sonopipe_load();
            obj.Handle = libpointer('voidPtr');
            sonopipe_check(calllib('sonopipe_client', 'sp_subscriber_create', obj.Handle), 'sp_subscriber_create');
            if nargin >= 3 && ~isempty(curveKeys)
                sonopipe_check(calllib('sonopipe_client', 'sp_subscriber_set_curve', obj.Handle, curveKeys.serverPublic, ...
                                       curveKeys.clientPublic, curveKeys.clientSecret), 'sp_subscriber_set_curve');
            end
            sonopipe_check(calllib('sonopipe_client', 'sp_subscriber_connect', obj.Handle, endpoint, topicPrefix), ...
                           'sp_subscriber_connect');
        end

        function result = next(obj, timeoutMs, attributeKeys)
            if nargin < 3
                attributeKeys = {};
            end
            pointer = libpointer('voidPtr');
            status = calllib('sonopipe_client', 'sp_subscriber_next', obj.Handle, int32(timeoutMs), pointer);
            if status == -4  % SP_ERROR_TIMEOUT
                result = [];
                return
            end
            sonopipe_check(status, 'sp_subscriber_next');
            result = read_result(pointer, attributeKeys);
            calllib('sonopipe_client', 'sp_result_release', pointer);
        end

        function delete(obj)
            if ~isempty(obj.Handle)
                calllib('sonopipe_client', 'sp_subscriber_close', obj.Handle);
                obj.Handle = [];
            end
        end
    end
end

function result = read_result(pointer, attributeKeys)
result.topic = calllib('sonopipe_client', 'sp_result_topic', pointer);
result.pipeline = calllib('sonopipe_client', 'sp_result_pipeline', pointer);
result.output = calllib('sonopipe_client', 'sp_result_output', pointer);
result.streamId = calllib('sonopipe_client', 'sp_result_stream_id', pointer);
result.inputSequence = calllib('sonopipe_client', 'sp_result_input_sequence', pointer);
result.acquisitionTimeNs = calllib('sonopipe_client', 'sp_result_acquisition_time_ns', pointer);
result.inputKind = calllib('sonopipe_client', 'sp_result_input_kind', pointer);
result.elementType = calllib('sonopipe_client', 'sp_result_element_type', pointer);
result.unit = calllib('sonopipe_client', 'sp_result_unit', pointer);
result.backend = calllib('sonopipe_client', 'sp_result_backend', pointer);
indices = uint32(0:double(calllib('sonopipe_client', 'sp_result_axis_count', pointer)) - 1);
names = arrayfun(@(i) calllib('sonopipe_client', 'sp_result_axis_name', pointer, i), indices, 'UniformOutput', false);
sizes = arrayfun(@(i) double(calllib('sonopipe_client', 'sp_result_axis_size', pointer, i)), indices);
spacings = arrayfun(@(i) calllib('sonopipe_client', 'sp_result_axis_spacing', pointer, i), indices);
units = arrayfun(@(i) calllib('sonopipe_client', 'sp_result_axis_unit', pointer, i), indices, 'UniformOutput', false);
origins = arrayfun(@(i) calllib('sonopipe_client', 'sp_result_axis_origin', pointer, i), indices);
result.axes = struct('name', names, 'size', num2cell(sizes), 'spacing', num2cell(spacings), 'unit', units, ...
                     'origin', num2cell(origins));
values = cellfun(@(key) calllib('sonopipe_client', 'sp_result_attribute', pointer, key), attributeKeys, 'UniformOutput', false);
result.attributes = cell2struct(values(:), attributeKeys(:), 1);
data = calllib('sonopipe_client', 'sp_result_data', pointer);
bytes = double(calllib('sonopipe_client', 'sp_result_bytes', pointer));
% Element type -> the MATLAB pointer type that reads it, and its size in bytes.
readers = struct('int16', {{'int16Ptr', 2}}, 'float16', {{'uint16Ptr', 2}}, 'float32', {{'singlePtr', 4}}, ...
                 'complex64', {{'singlePtr', 4}}, 'float64', {{'doublePtr', 8}}, 'uint8', {{'uint8Ptr', 1}});
reader = readers.(result.elementType);
setdatatype(data, reader{1}, bytes / reader{2}, 1);  % a column of that many values
values = data.Value;
if strcmp(result.elementType, 'complex64')
    values = complex(values(1:2:end), values(2:2:end));
end
result.data = reshape(values, [fliplr(sizes) 1]);
end
