// SPDX-License-Identifier: GPL-2.0-only
/*
 * prices_builtin.c - the built-in price table: the providers' published
 * list prices as known in November 2025 (docs/budget.md says to check
 * them), as text in /etc/latch/prices's format, read by the same parser
 * (prices.c's top comment gives the columns and line kinds).  Kept apart
 * from the reader so a price change is a change to this table alone.
 */
#include "budget/internal.h"

const char budget_builtin_prices[] =
	/* OpenAI: cached input is the automatic prompt cache; no write surcharge */
	"openai gpt-5.1                 1.25   10.00  0.125  -  128000  400000\n"
	"openai gpt-5.1-codex           1.25   10.00  0.125  -  128000  400000\n"
	"openai gpt-5                   1.25   10.00  0.125  -  128000  400000\n"
	"openai gpt-5-codex             1.25   10.00  0.125  -  128000  400000\n"
	"openai gpt-5-chat-latest       1.25   10.00  0.125  -   16384  128000\n"
	"openai gpt-5-mini              0.25    2.00  0.025  -  128000  400000\n"
	"openai gpt-5-nano              0.05    0.40  0.005  -  128000  400000\n"
	"openai gpt-5-pro              15.00  120.00  -      -  272000  400000\n"
	"openai gpt-4.1                 2.00    8.00  0.50   -   32768 1047576\n"
	"openai gpt-4.1-mini            0.40    1.60  0.10   -   32768 1047576\n"
	"openai gpt-4.1-nano            0.10    0.40  0.025  -   32768 1047576\n"
	"openai gpt-4o                  2.50   10.00  1.25   -   16384  128000\n"
	"openai gpt-4o-mini             0.15    0.60  0.075  -   16384  128000\n"
	/* snapshots dearer than their alias, from OpenAI's pricing page (platform.openai.com/docs/pricing) */
	"openai gpt-4o-2024-05-13       5.00   15.00  -      -    4096  128000\n"
	"openai chatgpt-4o-latest       5.00   15.00  -      -   16384  128000\n"
	/* Chat Completions' search models: every request also pays a web search (budget_prices_search_model()) */
	"openai gpt-5-search-api        1.25   10.00  0.125  -  128000  400000\n"
	"openai gpt-4o-search-preview   2.50   10.00  -      -   16384  128000\n"
	"openai gpt-4o-mini-search-preview 0.15 0.60  -      -   16384  128000\n"
	"openai o1                     15.00   60.00  7.50   -  100000  200000\n"
	"openai o1-preview             15.00   60.00  7.50   -   32768  128000\n"
	"openai o1-pro                150.00  600.00  -      -  100000  200000\n"
	"openai o3                      2.00    8.00  0.50   -  100000  200000\n"
	"openai o3-pro                 20.00   80.00  -      -  100000  200000\n"
	"openai o3-mini                 1.10    4.40  0.55   -  100000  200000\n"
	"openai o4-mini                 1.10    4.40  0.275  -  100000  200000\n"
	"openai codex-mini-latest       1.50    6.00  0.375  -  100000  200000\n"
	"openai gpt-4-turbo            10.00   30.00  -      -    4096  128000\n"
	"openai gpt-3.5-turbo           0.50    1.50  -      -    4096   16385\n"
	"openai text-embedding-3-small  0.02    0     -      -       0    8192\n"
	"openai text-embedding-3-large  0.13    0     -      -       0    8192\n"
	"openai text-embedding-ada-002  0.10    0     -      -       0    8192\n"
	/* gpt-image-1: text input $5, image input $10, image output $40 (the pricing page's image tokens); its
	 * output is all image; max_output is 10 images of 6,240 tokens (high quality, 1536x1024) */
	"openai gpt-image-1              5.00  40.00  1.25   -   62400  128000\n"
	"image openai gpt-image-1       10.00  40.00\n"
	/* the dated snapshots billed at their alias's prices (the pricing page lists them under it) */
	"snapshot openai gpt-5.1 gpt-5.1-2025-11-13\n"
	"snapshot openai gpt-5 gpt-5-2025-08-07\n"
	"snapshot openai gpt-5-mini gpt-5-mini-2025-08-07\n"
	"snapshot openai gpt-5-nano gpt-5-nano-2025-08-07\n"
	"snapshot openai gpt-5-pro gpt-5-pro-2025-10-06\n"
	"snapshot openai gpt-4.1 gpt-4.1-2025-04-14\n"
	"snapshot openai gpt-4.1-mini gpt-4.1-mini-2025-04-14\n"
	"snapshot openai gpt-4.1-nano gpt-4.1-nano-2025-04-14\n"
	"snapshot openai gpt-4o gpt-4o-2024-08-06 gpt-4o-2024-11-20\n"
	"snapshot openai gpt-4o-mini gpt-4o-mini-2024-07-18\n"
	"snapshot openai gpt-4o-search-preview gpt-4o-search-preview-2025-03-11\n"
	"snapshot openai gpt-4o-mini-search-preview gpt-4o-mini-search-preview-2025-03-11\n"
	"snapshot openai o1 o1-2024-12-17\n"
	"snapshot openai o1-preview o1-preview-2024-09-12\n"
	"snapshot openai o1-pro o1-pro-2025-03-19\n"
	"snapshot openai o3 o3-2025-04-16\n"
	"snapshot openai o3-pro o3-pro-2025-06-10\n"
	"snapshot openai o3-mini o3-mini-2025-01-31\n"
	"snapshot openai o4-mini o4-mini-2025-04-16\n"
	"snapshot openai gpt-4-turbo gpt-4-turbo-2024-04-09\n"
	"snapshot openai gpt-3.5-turbo gpt-3.5-turbo-0125\n"
	/* Anthropic: cached_input is a cache read, cache_write the 5-minute write (1.25x input) */
	"anthropic claude-opus-4-5      5.00   25.00  0.50   6.25   64000  200000\n"
	"anthropic claude-opus-4-1     15.00   75.00  1.50  18.75   32000  200000\n"
	"anthropic claude-opus-4-0     15.00   75.00  1.50  18.75   32000  200000\n"
	"anthropic claude-opus-4       15.00   75.00  1.50  18.75   32000  200000\n"
	"anthropic claude-sonnet-4-5    3.00   15.00  0.30   3.75   64000 1000000\n"
	"anthropic claude-sonnet-4-5>200000 6.00 22.50 0.60  7.50   64000 1000000\n"
	"anthropic claude-sonnet-4-0    3.00   15.00  0.30   3.75   64000 1000000\n"
	"anthropic claude-sonnet-4-0>200000 6.00 22.50 0.60  7.50   64000 1000000\n"
	"anthropic claude-sonnet-4      3.00   15.00  0.30   3.75   64000 1000000\n"
	"anthropic claude-sonnet-4>200000 6.00  22.50 0.60   7.50   64000 1000000\n"
	"anthropic claude-3-7-sonnet    3.00   15.00  0.30   3.75  128000  200000\n"
	"anthropic claude-haiku-4-5     1.00    5.00  0.10   1.25   64000  200000\n"
	"anthropic claude-3-5-sonnet    3.00   15.00  0.30   3.75    8192  200000\n"
	"anthropic claude-3-5-haiku     0.80    4.00  0.08   1.00    8192  200000\n"
	"anthropic claude-3-opus       15.00   75.00  1.50  18.75    4096  200000\n"
	"anthropic claude-3-haiku       0.25    1.25  0.03   0.30    4096  200000\n"
	/* the dated snapshots and -latest aliases of each (Anthropic's models overview and pricing pages) */
	"snapshot anthropic claude-opus-4-5 claude-opus-4-5-20251101\n"
	"snapshot anthropic claude-opus-4-1 claude-opus-4-1-20250805\n"
	"snapshot anthropic claude-opus-4 claude-opus-4-20250514\n"
	"snapshot anthropic claude-sonnet-4-5 claude-sonnet-4-5-20250929\n"
	"snapshot anthropic claude-sonnet-4 claude-sonnet-4-20250514\n"
	"snapshot anthropic claude-3-7-sonnet claude-3-7-sonnet-20250219 claude-3-7-sonnet-latest\n"
	"snapshot anthropic claude-haiku-4-5 claude-haiku-4-5-20251001\n"
	"snapshot anthropic claude-3-5-sonnet claude-3-5-sonnet-20240620 claude-3-5-sonnet-20241022 "
	"claude-3-5-sonnet-latest\n"
	"snapshot anthropic claude-3-5-haiku claude-3-5-haiku-20241022 claude-3-5-haiku-latest\n"
	"snapshot anthropic claude-3-opus claude-3-opus-20240229 claude-3-opus-latest\n"
	"snapshot anthropic claude-3-haiku claude-3-haiku-20240307\n"
	/* Gemini: cached_input is a context-cache read (storage is billed apart, not here) */
	"gemini gemini-3-pro-preview    2.00   12.00  0.20   -  65536 1048576\n"
	"gemini gemini-3-pro-preview>200000 4.00 18.00 0.40  -  65536 1048576\n"
	"gemini gemini-2.5-pro          1.25   10.00  0.31   -  65536 1048576\n"
	"gemini gemini-2.5-pro>200000   2.50   15.00  0.625  -  65536 1048576\n"
	"gemini gemini-2.5-flash        0.30    2.50  0.075  -  65536 1048576\n"
	"gemini gemini-flash-latest     0.30    2.50  0.075  -  65536 1048576\n"
	"gemini gemini-2.5-flash-lite   0.10    0.40  0.025  -  65536 1048576\n"
	"gemini gemini-flash-lite-latest 0.10   0.40  0.025  -  65536 1048576\n"
	"gemini gemini-2.0-flash        0.10    0.40  0.025  -   8192 1048576\n"
	"gemini gemini-2.0-flash-lite   0.075   0.30  -      -   8192 1048576\n"
	"gemini gemini-1.5-pro          1.25    5.00  0.3125 -   8192 2097152\n"
	"gemini gemini-1.5-pro>128000   2.50   10.00  0.625  -   8192 2097152\n"
	"gemini gemini-1.5-flash        0.075   0.30  0.01875 -  8192 1048576\n"
	"gemini gemini-1.5-flash>128000 0.15    0.60  0.0375 -   8192 1048576\n"
	"snapshot gemini gemini-2.0-flash gemini-2.0-flash-001\n"
	"snapshot gemini gemini-2.0-flash-lite gemini-2.0-flash-lite-001\n"
	/* the image models: text out at the row's price, image tokens out at the image line's (Gemini API pricing:
	 * $30 per million, $0.039 an image of 1,290 tokens; Gemini 3 Pro Image $120, $0.134 an image of 1,120) */
	"gemini gemini-2.5-flash-image  0.30    2.50  -      -  32768   32768\n"
	"image gemini gemini-2.5-flash-image 0.30 30.00\n"
	"snapshot gemini gemini-2.5-flash-image gemini-2.5-flash-image-preview\n"
	"gemini gemini-2.0-flash-preview-image-generation 0.10 0.40 - - 8192 32000\n"
	"image gemini gemini-2.0-flash-preview-image-generation 0.10 30.00\n"
	"gemini gemini-3-pro-image-preview 2.00 12.00 -      -  32768   65536\n"
	"image gemini gemini-3-pro-image-preview 2.00 120.00\n"
	/* Anthropic's server-side web search: $10 per 1,000 searches, beside the tokens its results add */
	"fee anthropic web_search 10.00\n"
	/* OpenAI Responses' web search: $10 per 1,000 calls, $25 for web_search_preview on the models
	 * without reasoning; one fee a provider, so the dearer, as a model missing from the table is.
	 * Chat Completions' search models pay it once a request */
	"fee openai web_search 25.00\n"
	/* Gemini's grounding with Google Search: $14 per 1,000 search queries from Gemini 3 on, $35 per
	 * 1,000 grounded prompts before (a request that ran any query), after a free allowance latch
	 * does not count (it charges from the first) */
	"fee gemini google_search 14.00\n"
	"fee gemini grounded_prompt 35.00\n"
	/* OpenAI Responses' file search: $2.50 per 1,000 calls (a file_search_call item each) */
	"fee openai file_search 2.50\n"
	/* OpenAI Responses' image generation tool: an image at gpt-image-1's dearest ($0.25, high quality
	 * at 1536x1024; $0.011 at low quality): write yours if your requests ask for less */
	"fee openai image_generation 250.00\n"
	/* OpenAI's code interpreter: $0.03 a container of 1 GB (4, 16 and 64 GB cost 4, 16 and 64 times that) */
	"fee openai code_interpreter 30.00\n";
