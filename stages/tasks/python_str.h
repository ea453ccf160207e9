/* Python's str.lower, str.upper and str.strip() on UTF-8 text, as lm-eval's lowercase, uppercase,
 * remove_whitespace and regex filters and exact_match's ignore_case apply them. Case is mapped
 * one code point to one (glibc's C.UTF-8 towlower/towupper, Unicode's simple mappings), with
 * Python's final-sigma rule ('ΑΣ'.lower() is 'ας'); Python's other SpecialCasing mappings, which
 * give several code points ('ß'.upper() is 'SS', 'İ'.lower() is 'i̇', ligatures), are not
 * applied (docs/tasks.md). Text that is not valid UTF-8 is kept byte for byte. */
#ifndef EVALMESH_TASKS_PYTHON_STR_H
#define EVALMESH_TASKS_PYTHON_STR_H

#include <stdbool.h>

/* The text with every code point mapped (malloc'd). */
char *em_python_lower(const char *text);
char *em_python_upper(const char *text);
/* str.strip(): without leading and trailing whitespace (str.isspace) (malloc'd). */
char *em_python_strip(const char *text);

#endif
