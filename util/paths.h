/* The one rule for paths written in a recipe: a relative path is relative to the directory of
 * the recipe file that wrote it (an included file's paths to the included file), an absolute path
 * is used as it is, and a path from the command line or from a recipe built in memory (whose
 * "file" is a name in angle brackets, such as "<command line>") is relative to the working
 * directory. Model, tokenizer, dataset, include, history, baseline and CA paths all go through
 * em_path_beside. */
#ifndef EVALMESH_PATHS_H
#define EVALMESH_PATHS_H

/* `path` as written in the file `written_in` (NULL: not in a file), resolved by the rule above,
 * with "." segments removed and "dir/.." folded. The caller frees the result. */
char *em_path_beside(const char *written_in, const char *path);

/* Removes "." segments and folds "dir/.." in place ("a/./b/../c" -> "a/c"; "" -> "."). */
void em_path_tidy(char *path);

#endif
