/* main: the pacefs command. */
#include "fs/fs.h"

int main(int argc, char **argv)
{
	return fs_main(argc, argv);
}
