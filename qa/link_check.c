/*
 * The main of the per-library link checks (qa/meson.build): each check links one Steer
 * library whole, with only the libraries docs/architecture.md lets it use, so an upward call
 * is an undefined symbol at link time. Nothing runs; linking is the test.
 */
int main(void)
{
	return 0;
}
