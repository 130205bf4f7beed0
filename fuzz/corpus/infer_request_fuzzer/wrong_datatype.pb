
static*
xINT64