/*
** gen-model regen and gen-model preview (review.c): review a template or generator change as
** the diff of every model.
*/
#ifndef GM_REVIEW_H
#define GM_REVIEW_H

/* argv[0] is "regen": gen-model regen [ID...] [--check] [--models DIR] [--templates DIR]; the exit status. */
int gm_regen_main(int argc, char **argv);

/* argv[0] is "preview": gen-model preview --templates DIR SOURCE... [--revision REV]; the exit status. */
int gm_preview_main(int argc, char **argv);

#endif
