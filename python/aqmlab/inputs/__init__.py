"""Reading what users write: the input files' errors (`file:line: key: message`) and where a key sits in a file."""
