// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a49a8ed8811e9cf5b6d3a252e9cd58109e0b7acc/chapter_03/Materials/blur.cu (lines 12-13, 16-63), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdint.h>
#include <cuda_runtime.h>

const int NUM_RGB_CHANNELS = 3;
const int BLUR_SIZE = 6;


/**
 * Blurs an RGB image given BLUR_SIZE.
 * 
 * The function is a modified version of the function from the book
 * to enable blurring an RGB image instead of a grayscale image.
 * 
 */
/* kernellsp
sizes = { W = 4096, H = 2048 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(H, 16)"], block = [16, 16] }
shapes = [{ W = 1000, H = 77 }, { W = 33, H = 65 }, { W = 1, H = 3 }, { W = 13, H = 1 }]
[args]
image_input = { dtype = "u8", dir = "in", count = "W * H * 3", dist = "randint(0, 256)" }
image_output = { dtype = "u8", dir = "out", count = "W * H * 3" }
width = { value = "W" }
height = { value = "H" }
*/
__global__
void blurKernelRGB(
    unsigned char * image_input,
    unsigned char * image_output,
    int width,
    int height
) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;

    if (col < width && row < height) {
        // Blur the image = computing the average of the surrounding BLUR_SIZE x BLUR_SIZE box.
        // Define the variables for getting the average.
        int rgb_pixel_value_total[] = {0, 0, 0};
        // One pixel count suffices since all count values for each RGB are the same.
        int pixel_count = 0;
        int rgb_offset = (row * width + col) * NUM_RGB_CHANNELS;

        for (int blur_row = -BLUR_SIZE; blur_row < BLUR_SIZE + 1; ++blur_row) {
            for (int blur_col = -BLUR_SIZE; blur_col < BLUR_SIZE + 1; ++blur_col) {
                int current_row = row + blur_row;
                int current_col = col + blur_col;

                // Ensure current_row and current_col are valid image pixel indices.
                // Check the first value in RGB should suffice.
                if (current_row >= 0 && current_row < height && current_col >= 0 && current_col < width) {
                    int current_rgb_offset = (current_row * width + current_col) * NUM_RGB_CHANNELS;
                    pixel_count += 1;
                    for (int rgb_index = 0; rgb_index < NUM_RGB_CHANNELS; ++rgb_index) {
                        rgb_pixel_value_total[rgb_index] += image_input[current_rgb_offset + rgb_index];
                    }
                }
            }
        }

        // Update the output.
        for (int rgb_index = 0; rgb_index < NUM_RGB_CHANNELS; ++rgb_index) {
            image_output[rgb_offset + rgb_index] = (unsigned char)(rgb_pixel_value_total[rgb_index] / pixel_count);
        }
    }
}
