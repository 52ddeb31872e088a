// SPDX-License-Identifier: GPL-2.0-only
/*
 * lazy_resolve.c - the first call of a lazily loaded library's function
 * (scripts/lazy_stubs.sh) lands here: the library is loaded, every
 * function of its table is looked up and written in, and the call goes on
 * to the function it meant.  A library that can't be loaded (or lacks a
 * function) ends the command: the caller has no way to go on without it,
 * and a half-working command would be worse.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "scripts/lazy_resolve.h"

void *latch_lazy_resolve(struct latch_lazy_lib *lib, long index);

static pthread_mutex_t lazy_lock = PTHREAD_MUTEX_INITIALIZER;

void *latch_lazy_resolve(struct latch_lazy_lib *lib, long index)
{
	void *handle, *fn;

	pthread_mutex_lock(&lazy_lock);
	handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		fprintf(stderr, "latch: cannot load %s, which this command needs: %s (install it: make deps)\n",
			lib->soname, dlerror());
		_exit(1);
	}
	for (int i = 0; i < lib->n; i++) {
		fn = dlsym(handle, lib->names[i]);
		if (!fn) {
			fprintf(stderr,
				"latch: %s has no %s, which this command needs (a library of another version?)\n",
				lib->soname, lib->names[i]);
			_exit(1);
		}
		__atomic_store_n(&lib->tab[i], fn, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lazy_lock);
	/* the handle is kept: the library stays loaded for the life of the process */
	return lib->tab[index];
}

/*
 * latch_lazy_enter: a stub's resolver entry pushed the function's index and
 * put the library's descriptor in %r11 (neither carries an argument).  The
 * argument registers (and %rax, the vector count of a variadic call) are
 * kept across the resolver, then the function is entered with the caller's
 * return address on top, as if it had been called directly.  At entry the
 * stack is 16-byte aligned (the call's return address plus the index), so
 * 7 pushes and 136 bytes keep the call below aligned.
 */
__asm__(".text\n"
	".globl latch_lazy_enter\n"
	".hidden latch_lazy_enter\n"
	".type latch_lazy_enter, @function\n"
	"latch_lazy_enter:\n"
	"	pushq %rdi\n	pushq %rsi\n	pushq %rdx\n	pushq %rcx\n"
	"	pushq %r8\n	pushq %r9\n	pushq %rax\n"
	"	subq $136, %rsp\n"
	"	movdqu %xmm0, 0(%rsp)\n	movdqu %xmm1, 16(%rsp)\n	movdqu %xmm2, 32(%rsp)\n"
	"	movdqu %xmm3, 48(%rsp)\n	movdqu %xmm4, 64(%rsp)\n	movdqu %xmm5, 80(%rsp)\n"
	"	movdqu %xmm6, 96(%rsp)\n	movdqu %xmm7, 112(%rsp)\n"
	"	movq %r11, %rdi\n"
	"	movq 192(%rsp), %rsi\n" /* the index: above 136 bytes and 7 registers */
	"	call latch_lazy_resolve\n"
	"	movq %rax, %r11\n"
	"	movdqu 0(%rsp), %xmm0\n	movdqu 16(%rsp), %xmm1\n	movdqu 32(%rsp), %xmm2\n"
	"	movdqu 48(%rsp), %xmm3\n	movdqu 64(%rsp), %xmm4\n	movdqu 80(%rsp), %xmm5\n"
	"	movdqu 96(%rsp), %xmm6\n	movdqu 112(%rsp), %xmm7\n"
	"	addq $136, %rsp\n"
	"	popq %rax\n	popq %r9\n	popq %r8\n	popq %rcx\n"
	"	popq %rdx\n	popq %rsi\n	popq %rdi\n"
	"	addq $8, %rsp\n" /* the index */
	"	jmp *%r11\n");
