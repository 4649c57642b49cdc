/*
** gen-model tokenize: encode stdin with a tokenizer.json, or decode ids.
*/
#ifndef GM_TOKENIZE_CMD_H
#define GM_TOKENIZE_CMD_H

/*
** argv[0] is "tokenize". Usage:
**   gen-model tokenize TOKENIZER_JSON [--no-special] [--no-parse-special] [--decode]
** Encode (default): reads UTF-8 text on stdin, byte for byte (a trailing
** newline is part of the text), and prints the ids separated by spaces.
** --no-special: no post-processor (no BOS); with --decode, drop special tokens.
** --no-parse-special: special tokens written in the text stay text.
** --decode: reads ids (separated by spaces, commas or newlines) and prints the text.
** Returns the exit status: 0 ok, 1 bad input, 2 usage.
*/
int gm_tokenize_main(int argc, char **argv);

#endif
