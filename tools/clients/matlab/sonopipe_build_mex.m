function sonopipe_build_mex(outputFolder)
%SONOPIPE_BUILD_MEX Makes the MEX gateway sonopipe_mex callable, compiling it when it is not.
%   sonopipe_build_mex()        nothing to do when sonopipe_mex is on the path; otherwise compiles
%                               sonopipe_mex.c (beside this file) against the installed client
%                               library into a folder of the user's own cache and adds it to the
%                               path (again only when the source is newer than the compiled file).
%   sonopipe_build_mex(folder)  compiles into `folder` and adds it to the path.
%   SonopipeSender and SonopipeSubscriber call it, so the first use compiles the gateway once.
%
%   Compiler: GNU Octave's `mkoctfile --mex` (Debian liboctave-dev), or MATLAB's `mex` (a C compiler
%   chosen with `mex -setup C`). The header and library come from SONOPIPE_CLIENT_INCLUDE_DIR and
%   SONOPIPE_CLIENT_LIBRARY_DIR, else from the installed tree this file is in:
%   <prefix>/share/sonopipe/matlab -> <prefix>/include/sonopipe and <prefix>/lib[/<multiarch>].
if nargin < 1 && exist('sonopipe_mex', 'file') == 3
    return
end
isOctave = exist('OCTAVE_VERSION', 'builtin') ~= 0;
if nargin < 1
    if isOctave
        tag = ['octave-' OCTAVE_VERSION];
    else
        tag = ['matlab-' version('-release')];
    end
    cache = getenv('XDG_CACHE_HOME');
    if isempty(cache)
        cache = fullfile(getenv('HOME'), '.cache');
    end
    outputFolder = fullfile(cache, 'sonopipe', ['mex-' tag]);
end
here = fileparts(mfilename('fullpath'));
source = fullfile(here, 'sonopipe_mex.c');
output = fullfile(outputFolder, ['sonopipe_mex.' mexext()]);
if nargin < 1 && exist(output, 'file') && newer_or_same(output, source)
    addpath(outputFolder);
    return
end

prefix = fullfile(here, '..', '..', '..');
includeDir = getenv('SONOPIPE_CLIENT_INCLUDE_DIR');
if isempty(includeDir)
    includeDir = fullfile(prefix, 'include', 'sonopipe');
end
if ~exist(fullfile(includeDir, 'sonopipe_client.h'), 'file')
    error('sonopipe:build', 'no sonopipe_client.h in %s: set SONOPIPE_CLIENT_INCLUDE_DIR', includeDir);
end
libraryDir = getenv('SONOPIPE_CLIENT_LIBRARY_DIR');
if isempty(libraryDir)
    libraryDir = find_library(fullfile(prefix, 'lib'));
end
if isempty(libraryDir)
    error('sonopipe:build', 'no libsonopipe-client under %s: set SONOPIPE_CLIENT_LIBRARY_DIR', fullfile(prefix, 'lib'));
end
if ~exist(outputFolder, 'dir')
    mkdir(outputFolder);
end
if isOctave
    [text, status] = mkoctfile('--mex', ['-I' includeDir], source, ['-L' libraryDir], '-lsonopipe-client', ...
                               ['-Wl,-rpath,' libraryDir], '-o', output);
    if status ~= 0
        error('sonopipe:build', 'mkoctfile --mex %s failed:\n%s', source, text);
    end
else
    mex('-R2017b', ['-I' includeDir], source, ['-L' libraryDir], '-lsonopipe-client', ...
        ['LDFLAGS=$LDFLAGS -Wl,-rpath,' libraryDir], '-outdir', outputFolder);
end
addpath(outputFolder);
end

function folder = find_library(libRoot)
% lib/ or lib/<multiarch>/ holding libsonopipe-client.so (GNUInstallDirs' choice for the prefix).
folder = '';
candidates = [{libRoot}, cellfun(@(d) fullfile(libRoot, d), list_folders(libRoot), 'UniformOutput', false)];
for i = 1:numel(candidates)
    if exist(fullfile(candidates{i}, 'libsonopipe-client.so'), 'file')
        folder = candidates{i};
        return
    end
end
end

function names = list_folders(folder)
entries = dir(folder);
names = {entries([entries.isdir] & ~ismember({entries.name}, {'.', '..'})).name};
end

function yes = newer_or_same(file, than)
a = dir(file);
b = dir(than);
yes = a.datenum >= b.datenum;
end
